#!/usr/bin/env bash
# Regenerate the README's screenshots (docs/book-*.png) from a built book (`make book` first): the
# landing page and chapters 4 and 11 in headless Chromium at 1280 px wide, scaled to 880 px.
# Usage: scripts/readme_screenshot.sh [HTML_DIR]   (default _build/html)
set -euo pipefail
cd "$(dirname "$0")/.."
html="$(realpath "${1:-_build/html}")"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
shot() {  # page, output, window height
    local page="$html/book/$1.html"
    [ -f "$page" ] || { echo "no built page at $page: run make book first" >&2; exit 1; }
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,"$3" \
        --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" --virtual-time-budget=8000 \
        --screenshot="$tmp/shot.png" "file://$page" >/dev/null 2>&1
    .venv/bin/python - "$tmp/shot.png" "docs/$2.png" <<'PY'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
im.resize((880, round(im.size[1] * 880 / im.size[0])), Image.LANCZOS).save(sys.argv[2], optimize=True)
PY
    echo "wrote docs/$2.png from $page"
}
shot intro book-landing 2300
shot 04-rarest-first book-chapter-4 2300
shot 11-paper-vs-suite book-chapter-11 2600
