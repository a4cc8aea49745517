#!/usr/bin/env python3
"""One step's kernels in an Nsight Compute CSV (`ncu --csv --metrics gpu__time_duration.sum`).

Usage: scripts/ncu_step_kernels.py NCU.csv...

A run of `xtask logits --tint --timing` does a warm-up step and then the timed steps with the same
launches, so one step is the longest block of kernels repeated back to back. Prints its kernel
count, the sum of its kernels' GPU time, the kernels that take the most of it and the median.
(scripts/gpu_kernel_profile.sh; docs/performance.md, "GPU: NVIDIA H200, `cuda`, B = 1, 16, 64".)
"""
import csv, sys
from collections import Counter
def load(f):
    with open(f) as fh:
        lines=[l for l in fh if l.startswith('"')]
    rows=[]
    for r in csv.DictReader(lines):
        try: rows.append((r["Kernel Name"], float(r["Metric Value"].replace(",",""))))
        except: pass
    return rows
for f in sys.argv[1:]:
    s=load(f); n=len(s)
    ids={}; arr=[ids.setdefault(k,len(ids)) for k,_ in s]
    found=None
    for L in range(n//2, 50, -1):
        run=0
        for i in range(n-L):
            if arr[i]==arr[i+L]:
                run+=1
                if run>=L: found=(L,i-L+1);break
            else: run=0
        if found: break
    print(f, "kernels", n, "distinct", len(ids), "period,start", found)
    if found:
        L,a=found; step=s[a+L:a+2*L]
        tot=sum(t for _,t in step)/1e6
        print(" one step: kernels", len(step), "sum kernel time %.2f ms"%tot, "kernels before", a)
        c=Counter(); d=Counter()
        for k,t in step:
            c[k[:60]]+=1; d[k[:60]]+=t
        for k,v in sorted(d.items(), key=lambda x:-x[1])[:12]:
            print("  %-60s %5d %8.3f ms"%(k,c[k],v/1e6))
        durs=sorted(t for _,t in step)
        print("  median kernel us %.1f p90 %.1f max %.1f"%(durs[len(durs)//2]/1e3, durs[int(len(durs)*.9)]/1e3, durs[-1]/1e3))
