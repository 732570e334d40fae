import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
keys = [c for c in ("precision", "K") if c in d]
w = d.pivot_table("value", [*keys, "variant", "kernel"], "metric", aggfunc="first")
cols = {"launch__registers_per_thread": "regs", "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram%", "sm__issue_active.avg.pct_of_peak_sustained_elapsed": "issue%",
        "smsp__average_warp_latency_per_inst_issued.ratio": "cyc/inst", "gpu__time_duration.sum": "time",
        "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": "local st sectors"}
t = w[[c for c in cols if c in w]].rename(columns=cols)
st = w[[c for c in w if "issue_stalled" in c]]
t["top stall"] = st.idxmax(axis=1).str.replace("smsp__average_warps_issue_stalled_", "").str.replace("_per_issue_active.ratio", "")
pd.set_option("display.width", 250); pd.set_option("display.max_colwidth", 40)
print(t.round(2).to_string())
