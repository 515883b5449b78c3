"""The safety wing: what every file and folder the suite reads or writes goes through.

:mod:`.inputs` reads untrusted input files (regular file, size cap, strict UTF-8, strict YAML/JSON);
:mod:`.outputs` guards output folders (one run per folder, atomic writes, no silent overwrite);
:mod:`.redact` is the one redaction rule for strings that can hold a credential.
"""
