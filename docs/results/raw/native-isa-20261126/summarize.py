import json,glob,statistics as st
def load(d):
    out=[]
    for f in sorted(glob.glob(d+'/*.json')):
        doc=json.load(open(f)); rows={(r['name'],r['params']['op']):r for r in doc['results']}
        h=rows[('hemx','mul_rescale')]['params']
        rec={'file':f.split('/')[-1],'isa':h['isa'],'ntt':h['ntt'].split()[0],'stamp':doc['created_utc']}
        for op in ('mul_rescale','rotate'):
            rec[op]=(rows[('hemx',op)]['median_s'],rows[('desilofhe',op)]['median_s'])
        out.append(rec)
    return out
def phase(r):  # quiet window: no other job on the 2 vCPUs (see native-isa-cpu.md)
    return 'quiet' if '20261126T214245Z' <= r['stamp'] <= '20261126T214730Z' or r['stamp'] >= '20261126T215300Z' else 'loaded'
for d,label in (('docs/results/raw/native-isa-20261126/ops-native','--ntt native'),('docs/results/raw/native-isa-20261126/ops-planner','planner'),('docs/results/raw/native-isa-20261126/ops-native-sync','--ntt native, sync'),('docs/results/raw/native-isa-20261126/ops-planner-sync','planner, sync')):
    recs=load(d)
    for ph in ('quiet','loaded'):
        print(f"\n### {label}, {ph}")
        print("| ISA | runs | NTT | HE-Mult+Rescale hemx ms | desilofhe ms | desilofhe/hemx | Rotate hemx ms | desilofhe ms | desilofhe/hemx |")
        print("|---|---|---|---|---|---|---|---|---|")
        for isa in ('scalar','avx2','avx512'):
            rr=[r for r in recs if r['isa']==isa and phase(r)==ph]
            if not rr: continue
            cells=[isa,str(len(rr)),rr[0]['ntt']]
            for op in ('mul_rescale','rotate'):
                h=[r[op][0]*1e3 for r in rr]; p=[r[op][1]*1e3 for r in rr]; q=[r[op][1]/r[op][0] for r in rr]
                cells+= [f"{st.median(h):.1f} ({min(h):.1f}–{max(h):.1f})", f"{st.median(p):.1f}", f"{st.median(q):.2f}× ({min(q):.2f}–{max(q):.2f})"]
            print("| "+" | ".join(cells)+" |")
        print("runs:", ", ".join(f"{r['file']}={r['isa']}" for r in recs if phase(r)==ph))
