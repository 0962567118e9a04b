#!/usr/bin/env bash
# python_torch.sh -- runs tests/python_torch.py with the first Python that
# has PyTorch (python3 on the path, else the system's /usr/bin/python3,
# where Debian's python3-torch installs); a TAP skip without one.
# Usage: python_torch.sh PYTHON_TORCH_PY PYTHON_DIR LIBBATON
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c 'import torch' 2>/dev/null; then exec "$py" "$@"; fi
done
echo "1..0 # SKIP no Python with PyTorch (Debian: apt-get install python3-torch)"
