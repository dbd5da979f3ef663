#!/usr/bin/env bash
# Installs the Debian 12 packages bertfit needs to build, test and run (only those missing).
# Usage: scripts/setup.sh            (as root, or with sudo available)
# ocl-icd-opencl-dev: Debian's oneDNN is built with its OpenCL runtime, and its CMake package
# (find_package(dnnl)) fails without OpenCL's headers; apt only recommends it, and recommends
# are not installed here. libcurl4-openssl-dev and libssl-dev: the Hub client (src/hub: HTTPS, and
# libcrypto's sha256); python3: the Hub emulator its tests start.
# python3-torch: the checkpoint tests (io_pytorch_test, model_io_test) have PyTorch itself write
# the pytorch_model.bin files they read (tests/fixtures/make_torch_checkpoints.py, run with
# /usr/bin/python3); without it those tests skip.
# libsentencepiece-dev: the SentencePiece tokenizer (XLM-R, CamemBERT: sentencepiece.bpe.model).
# libboost-dev: Boost.Beast/Asio (header-only), the HTTP server of `bertfit serve` (src/serve).
# chromium and zlib1g-dev: report_cli_test renders `bertfit report`'s page in headless Chromium
# and decodes the screenshot (PNG: zlib); without Chromium that test checks the page as text.
# wrk: the HTTP load of bench/serve_http.sh and bench/embed_vs_ort.sh.
# curl: the serving examples of README.md and docs/ that docs_examples_test runs.
# python3-optuna and python3-sklearn: `bertfit tune`'s TPE sampler and knob importance (fANOVA)
# run in /usr/bin/python3; libtcmalloc-minimal4 and libjemalloc2: the allocators tune can preload.
set -euo pipefail
packages=(
  build-essential cmake pkg-config git
  libdnnl-dev ocl-icd-opencl-dev libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libutf8proc-dev libsentencepiece-dev libcli11-dev libcurl4-openssl-dev libssl-dev libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format
  iproute2 python3 python3-torch
  chromium zlib1g-dev wrk curl
  python3-optuna python3-sklearn libtcmalloc-minimal4 libjemalloc2
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
