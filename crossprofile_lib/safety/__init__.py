"""The safety wing: what every file and folder the suite reads or writes goes through.

* :mod:`.inputs` -- the one safe-input layer (size caps, strict UTF-8, strict YAML/JSON, path names);
* :mod:`.outputs` -- one run per output folder (a lock), atomic writes, the "would this destroy work" check;
* :mod:`.redact` -- the one redaction rule for every string that can hold a credential.
"""
