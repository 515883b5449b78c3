"""The safety wing: what every file and folder the suite reads or writes goes through.

* :mod:`.inputs` -- the one safe-input layer: every input file (templates, HiddenBench JSON, prereg
  YAML, chat-template and tokenizer files, run headers) is a regular file read with a size cap,
  strict UTF-8 (a UTF-8 byte-order mark accepted), strict YAML/JSON (no duplicate key, a depth
  limit, no alias, no NaN, no huge integer, no control or invisible character); path names the
  file system cannot hold and strict option numbers are refused there too;
* :mod:`.outputs` -- output folders: one run per folder (a lock), atomic writes that honour the
  umask and name a full disk, and the one "would this destroy existing work" check every command
  runs on its output path;
* :mod:`.redact` -- the one redaction rule for every string that can hold a credential (URLs,
  options, command lines, free text).
"""
