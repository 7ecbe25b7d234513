#!/usr/bin/env bash
# python3 -m pip install ARGS..., with the flags this machine's Python needs: Debian's own
# python3 is "externally managed" (PEP 668), so pip installs into /usr/local only with
# --break-system-packages (a pyenv, venv or other Python is not); as root, no warning about it.
#   scripts/pip-install.sh pyarrow pandas          # what the tests need
#   scripts/pip-install.sh --no-build-isolation .  # the package `spelunk` from this tree
set -euo pipefail
flags=(--quiet --disable-pip-version-check)
[ "$(id -u)" = 0 ] && flags+=(--root-user-action=ignore)
if python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))' \
  && [ -z "${VIRTUAL_ENV:-}" ]; then
  flags+=(--break-system-packages)
fi
exec python3 -m pip install "${flags[@]}" "$@"
