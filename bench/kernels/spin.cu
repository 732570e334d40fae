// One thread waits on the global timer, so the stream is busy for the time asked, whatever the SM
// clock: the test-only slowdown (bench/slowdown.py), and the wait that queues launches in
// bench/peaks.py.
extern "C" __global__ void spin(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}
