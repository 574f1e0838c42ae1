#!/usr/bin/env bash
# The product kernels' round on one GPU, in one call (about 8 minutes on an H200): build the RG-LRU suite, its
# benchmark and the products probe; run the [products] cases (every byte against the wmma kernels), the probe, the
# benchmark, the whole RG-LRU suite, then compute-sanitizer's four tools over the [products] cases. Logs and JSON
# go to OUTDIR (a dozen files: through the device tool, write them outside $OUT and pack them into one archive there,
# e.g. `bench/run-product-kernels-on-gpu.sh /tmp/r; tar czf $OUT/r.tgz -C /tmp r`). Catch2 comes from the Debian
# package carried in .gpu/ (GPU.md). Pass HAWK_COMMIT for the benchmark's JSON: the device tool's copy of the tree may
# carry a stale .git (on 2026-12-04 it named the commit of an earlier call's tree).
#
#   HAWK_COMMIT=abc1234 bench/run-product-kernels-on-gpu.sh OUTDIR [--no-sanitize] [--profile]
#
# SANITIZE_FILTER (a regular expression over the suite's case names, default "products") widens the sanitizer's
# cases, e.g. SANITIZE_FILTER='products|compact' where the compact configurations changed too.
#
# --profile also takes an Nsight Compute profile (--set full, SASS-level stall samples) of each product kernel over
# one time slice of (1, 8192, 2560, 10) (the probe's --slice), where the twentieth session's profile was taken.
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # ensure_catch2
out=${1:?usage: bench/run-product-kernels-on-gpu.sh OUTDIR [--no-sanitize] [--profile]}
shift
sanitize=1 profile=0
for option in "$@"; do
  case "$option" in
    --no-sanitize) sanitize=0 ;;
    --profile) profile=1 ;;
    *) echo "unknown option $option" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
cd "$(dirname "$0")/.."
ensure_catch2 || exit 2
export HAWK_COMMIT=${HAWK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
status=0
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_PREFIX_PATH=/opt/catch2/usr -DCMAKE_BUILD_TYPE=Release -DHAWK_BUILD_PROBES=ON \
  > "$out/configure.log" 2>&1 || { tail -n 40 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" --target hawk_gpu_rglru bench_rglru backward_products_probe \
  > "$out/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$out/build.log" | head -n 60; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
suite=$(find build-gpu -name hawk_gpu_rglru -type f -perm -u+x | head -n 1)
bench=$(find build-gpu -name bench_rglru -type f -perm -u+x | head -n 1)
probe=$(find build-gpu -name backward_products_probe -type f -perm -u+x | head -n 1)
"$suite" "[products]" > "$out/products.txt" 2>&1 || status=1
tail -n 3 "$out/products.txt"
timeout 300 "$probe" "$out/products_probe.json" > "$out/products_probe.txt" 2>&1 || status=1
grep -E "shipped|differing bytes [1-9]" "$out/products_probe.txt" | head -n 40
timeout 240 "$bench" "$out/bench_rglru.json" > "$out/bench_rglru.log" 2>&1 || status=1
tail -n 20 "$out/bench_rglru.log"
"$suite" > "$out/suite.txt" 2>&1 || status=1
tail -n 3 "$out/suite.txt"
if [ $profile = 1 ]; then
  for kernel in dx weight_grad; do
    ncu --set full --import-source yes -k "regex:^backward_${kernel}_kernel" -c 1 -f -o "/tmp/ncu_$kernel" \
      "$probe" --slice > "$out/ncu_$kernel.log" 2>&1 || status=1
    ncu --import "/tmp/ncu_$kernel.ncu-rep" --page details > "$out/ncu_${kernel}_details.txt" 2>&1
    ncu --import "/tmp/ncu_$kernel.ncu-rep" --page source --csv --print-source sass > "$out/ncu_${kernel}_sass.csv" 2>&1
  done
  grep -E "Duration|Eligible Warps|Issued Warp" "$out"/ncu_*_details.txt | head -n 12
fi
if [ $sanitize = 1 ]; then
  t0=$(date +%s)
  python3 tests/run_sanitizer.py --tool memcheck --tool racecheck --tool initcheck --tool synccheck --jobs 16 \
    --filter "${SANITIZE_FILTER:-products}" --logs "$out/sanitize" "$suite" > "$out/sanitizer.txt" 2>&1 || status=1
  tail -n 5 "$out/sanitizer.txt"
  echo "sanitize: $(( $(date +%s) - t0 )) s"
fi
exit $status
