"""``deepseek/<model>``: the DeepSeek preset of :mod:`crossprofile_lib.backends.openai_compat`."""

from .openai_compat import DeepSeekBackend  # noqa: F401  (registers 'openai' and 'deepseek')
