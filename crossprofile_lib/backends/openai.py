"""``openai/<model>``: registered by :mod:`crossprofile_lib.backends.openai_compat` (this module
exists so the lazy provider loader finds the provider by its name)."""

from .openai_compat import OpenAICompatBackend  # noqa: F401  (registers 'openai' and 'deepseek')
