# ---- /tmp/isa/runall.sh (as run)
#!/bin/bash
cd /work/main
set -x
for order in "scalar avx2 avx512" "avx2 avx512 scalar" "avx512 scalar avx2"; do
  for isa in $order; do
    date -u +%FT%TZ; uptime
    .venv/bin/hemx bench ops --sets P16 --peers desilofhe --batch 1 --repeats 7 --threads 2 --isa $isa --out /tmp/isa/ops
  done
done
date -u +%FT%TZ; uptime
.venv/bin/python docs/results/raw/native-isa-20261126/native-isa-ntt.py /tmp/isa/ntt-interleaved-1.json 15
for isa in scalar avx2 avx512; do
  date -u +%FT%TZ; uptime
  HEMX_NATIVE_ISA=$isa .venv/bin/hemx bench kernels --suite native --no-roofline --peers desilofhe --threads 2 --repeats 7 --out /tmp/isa/kernels
done
date -u +%FT%TZ; uptime
.venv/bin/python docs/results/raw/native-isa-20261126/native-isa-ntt.py /tmp/isa/ntt-interleaved-2.json 15
date -u +%FT%TZ; uptime
echo ALLDONE
# ---- /tmp/isa/run2.sh (as run)
#!/bin/bash
cd /work/main
set -x
run() { # isa outdir extra...
  local isa=$1 out=$2; shift 2
  date -u +%FT%TZ; uptime
  HEMX_CACHE_DIR=/tmp/isa/cache-$isa .venv/bin/hemx bench ops --sets P16 --peers desilofhe --batch 1 --repeats 7 --threads 2 --isa $isa --out $out "$@"
}
for isa in scalar avx2 avx512; do run $isa /tmp/isa/ops-planner; done
for order in "avx2 avx512 scalar" "avx512 scalar avx2" "scalar avx2 avx512"; do
  for isa in $order; do run $isa /tmp/isa/ops-native --ntt native; done
done
for isa in avx512 scalar avx2; do run $isa /tmp/isa/ops-planner; done
date -u +%FT%TZ; uptime
echo ALLDONE
# ---- /tmp/isa/run3.sh (as run)
#!/bin/bash
cd /work/main
set -x
run() { local isa=$1 out=$2; shift 2; date -u +%FT%TZ; uptime
  HEMX_CACHE_DIR=/tmp/isa/cache-$isa .venv/bin/hemx bench ops --sets P16 --peers desilofhe --batch 1 --repeats 7 --threads 2 --isa $isa --out $out "$@"; }
for isa in scalar avx2 avx512; do run $isa /tmp/isa/ops-planner; done
run scalar /tmp/isa/ops-native --ntt native
date -u +%FT%TZ; uptime
.venv/bin/python docs/results/raw/native-isa-20261126/native-isa-ntt.py /tmp/isa/ntt-interleaved-3.json 15
date -u +%FT%TZ; uptime
echo ALLDONE
# ---- /tmp/isa/run4.sh (as run)
#!/bin/bash
cd /work/main
set -x
run() { local isa=$1 out=$2; shift 2; date -u +%FT%TZ; uptime
  HEMX_CACHE_DIR=/tmp/isa/cache-$isa .venv/bin/hemx bench ops --sets P16 --peers desilofhe --batch 1 --repeats 7 --threads 2 --isa $isa --out $out "$@"; }
for order in "avx512 avx2 scalar" "avx2 scalar avx512"; do for isa in $order; do run $isa /tmp/isa/ops-native --ntt native; done; done
for isa in avx2 avx512 scalar; do run $isa /tmp/isa/ops-planner; done
for isa in avx512 avx2 scalar; do date -u +%FT%TZ; uptime
  HEMX_NATIVE_ISA=$isa .venv/bin/hemx bench kernels --suite native --no-roofline --peers desilofhe --threads 2 --repeats 7 --out /tmp/isa/kernels; done
date -u +%FT%TZ; uptime
.venv/bin/python docs/results/raw/native-isa-20261126/native-isa-ntt.py /tmp/isa/ntt-interleaved-4.json 15
date -u +%FT%TZ; uptime
echo ALLDONE
# ---- /tmp/isa/run5.sh (as run)
#!/bin/bash
cd /work/main
set -x
run() { local isa=$1 out=$2; shift 2; date -u +%FT%TZ; uptime; ps -eo pid,pcpu,etime,comm --sort=-pcpu | sed -n 2,4p
  HEMX_CACHE_DIR=/tmp/isa/cache-$isa .venv/bin/hemx bench ops --sets P16 --peers desilofhe --batch 1 --repeats 7 --threads 2 --isa $isa --out $out "$@"; }
for order in "scalar avx2 avx512" "avx2 avx512 scalar" "avx512 scalar avx2"; do for isa in $order; do run $isa /tmp/isa/ops-native-sync --ntt native; done; done
for isa in avx512 avx2 scalar; do run $isa /tmp/isa/ops-planner-sync; done
date -u +%FT%TZ; uptime
.venv/bin/python docs/results/raw/native-isa-20261126/native-isa-ntt.py /tmp/isa/ntt-interleaved-5.json 21
date -u +%FT%TZ; uptime
echo ALLDONE
# ---- /tmp/isa/run6.sh (as run)
#!/bin/bash
# wait (up to 9 min) for a window where no other process uses CPU, then one sync round per ISA (native NTT) + NTT script
cd /work/main
quiet() { local busy; busy=$(ps -eo pid,pcpu,comm --no-headers | awk -v me=$$ '$1!=me && $2>15 {print}' | grep -v kdamond | wc -l); [ "$busy" -eq 0 ]; }
end=$((SECONDS+540))
n=0
while [ $SECONDS -lt $end ] && [ $n -lt 2 ]; do
  # ps pcpu is lifetime average; use top snapshot instead
  busy=$(top -b -n 2 -d 2 | awk '/^top -/{k++} k==2 && $1 ~ /^[0-9]+$/ && $9+0 > 15 {print $1, $9, $12}' | grep -v kdamond)
  if [ -z "$busy" ]; then
    n=$((n+1))
    for isa in avx2 avx512 scalar; do
      date -u +%FT%TZ; uptime; top -b -n 1 | sed -n 8,10p
      HEMX_CACHE_DIR=/tmp/isa/cache-$isa .venv/bin/hemx bench ops --sets P16 --peers desilofhe --batch 1 --repeats 7 --threads 2 --isa $isa --out /tmp/isa/ops-native-sync-quiet --ntt native
      date -u +%FT%TZ; top -b -n 1 | sed -n 8,10p
    done
    .venv/bin/python docs/results/raw/native-isa-20261126/native-isa-ntt.py /tmp/isa/ntt-interleaved-6-$n.json 21
    date -u +%FT%TZ; top -b -n 1 | sed -n 8,10p
  else
    echo "$(date -u +%T) busy: $busy"; sleep 10
  fi
done
echo ALLDONE
