"""bench verify --sanitizer: compute-sanitizer's reports grouped by kernel."""

from bench import sanitize


def test_reports_name_their_kernels_and_skip_racecheck_warnings():
    lines = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at 0x70 in /tmp/x.cu:5:saber_sample_tree(int *)
=========     by thread (0,0,0) in block (0,0,0)
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: cuLaunchKernel [0x2] in libcuda.so
========= Error: Race reported between Write access at drawz_alg7_f32(int *)+0x90 in /tmp/x.cu:6
=========     and Read access at drawz_alg7_f32(int*)+0xb0 in /tmp/x.cu:7 [4 hazards]
========= Warning: Race reported between Read access at k3(int *)+0x10 in /tmp/x.cu:9
========= Invalid __global__ write of size 8 bytes
=========     at k2+0x1a0
========= ERROR SUMMARY: 3 errors""".splitlines()
    assert sanitize.reports(lines) == [
        ("saber_sample_tree", "Invalid __global__ read of size 4 bytes"),
        ("drawz_alg7_f32", "Error: Race reported between Write access at drawz_alg7_f32(int *)+0x90 in /tmp/x.cu:6"),
        ("k2", "Invalid __global__ write of size 8 bytes"),
    ]


def test_a_racecheck_summary_counts_errors_not_warnings():
    match = sanitize._SUMMARY.search("========= RACECHECK SUMMARY: 4 hazards displayed (0 errors, 4 warnings)")
    assert int(match.group(1) or match.group(2)) == 0
    match = sanitize._SUMMARY.search("========= ERROR SUMMARY: 2 errors")
    assert int(match.group(1) or match.group(2)) == 2
