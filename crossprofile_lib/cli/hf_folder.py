"""``crossprofile hf-folder [smollm2-135m | PATH.gguf]``: a GGUF model as a Hugging Face folder for vLLM (which loads
no GGUF), converted once into the user cache folder and printed. The library is
:mod:`crossprofile_lib.backends.hf_folder`."""

from __future__ import annotations

from crossprofile_lib.cli import args as A


def _cmd(args) -> int:
    from pathlib import Path

    from crossprofile_lib.backends.hf_folder import hf_folder
    try:
        print(hf_folder(args.model, Path(args.out) if args.out else None))
    except FileNotFoundError as e:
        return A.fail(e, 2)
    except ValueError as e:
        return A.fail(e, 2)
    except OSError as e:  # a full disk, a folder that cannot be written
        return A.fail(e, 1)
    return 0


COMMAND = "hf-folder"
HELP = "convert a GGUF model (default: the embedded SmolLM2) to a Hugging Face folder for vLLM, once"


def register(sub) -> None:
    from crossprofile_lib.backends.hf_folder import MODELS_ENV
    p = sub.add_parser(COMMAND, help=HELP, description=A.plain(__doc__.splitlines()[0]))
    p.add_argument("model", nargs="?", default="smollm2-135m", help="smollm2-135m (default) or a GGUF file")
    p.add_argument("--out", type=A.path_name, help=f"where converted models go (default: ${MODELS_ENV}, else the "
                   "user cache folder's hf-models/)")
    p.set_defaults(func=_cmd)
