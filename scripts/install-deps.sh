#!/usr/bin/env bash
# Installs the Debian packages rankscope needs and the machine lacks. Safe to run again.
# The CUDA 13 toolkit (nvcc, CUPTI, NVTX, NCCL) is not a Debian package: when nvcc is
# missing, the CPU parts still build and this script says so.
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config python3
  libsqlite3-dev   # trace store
  libfmt-dev       # formatting
  libcli11-dev     # command line
  nlohmann-json3-dev # JSON
  libsimdjson-dev  # large JSON in: Kineto traces
  zlib1g-dev       # gzip: .json.gz traces read in pieces, and Chrome exports
  libdeflate-dev   # gzip: .json.gz traces inflated whole, faster than zlib
  libeigen3-dev    # least squares of the scaling projection fit (compare/)
  clang libclang-rt-14-dev  # the importers' libFuzzer targets (tests/fuzz)
  libgtest-dev     # tests
  libbenchmark-dev # bench/
  libgloo-dev      # the trainer's CPU collectives
  libhiredis-dev   # Gloo's Redis rendezvous store (several nodes)
  redis-server     # a Redis for the multi-node rendezvous test
  qt6-base-dev qt6-svg-dev  # the viewer (gui/); Qt SVG shows report/'s charts in the Scaling tab
  libcairo2-dev      # the charts as PNG (report/plot_canvas.cc)
  fonts-dejavu-core  # a font for the viewer's offscreen screenshots and tests
  patchelf           # scripts/gpu/bundle.sh: bundled programs find their libraries by RPATH
  python3-torch      # `profile --pytorch` end to end with real PyTorch (CPU, Gloo), for /usr/bin/python3
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: no CUDA toolkit (nvcc) found; building the CPU parts only"
fi
