#!/usr/bin/env bash
# npm run sandbox:image — builds corral-sandbox:<recipe hash> offline (see resources/sandbox/build-image.sh).
# Exits at once when the image for the current recipe and runner already exists.
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/resources/sandbox/build-image.sh" "$@"
