#!/usr/bin/env bash
# Regenerate docs/book-chapter-4.png (the README's screenshot) from a built book (`make book` first):
# headless Chromium at 1280x2300, scaled to 880 px wide. Usage: scripts/readme_screenshot.sh [HTML_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
html="${1:-_build/html}"
page="$(realpath "$html")/book/04-rarest-first.html"
[ -f "$page" ] || { echo "no built chapter 4 at $page: run make book first" >&2; exit 1; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,2300 \
    --screenshot="$tmp/shot.png" "file://$page" >/dev/null 2>&1
.venv/bin/python - "$tmp/shot.png" docs/book-chapter-4.png <<'PY'
import sys
from PIL import Image
im = Image.open(sys.argv[1])
im.resize((880, round(im.size[1] * 880 / im.size[0])), Image.LANCZOS).save(sys.argv[2], optimize=True)
PY
echo "wrote docs/book-chapter-4.png from $page"
