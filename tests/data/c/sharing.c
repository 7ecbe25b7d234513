/* Test program for `spelunk c2c` (crates/cli/tests/c2c_cli.rs), after the false-sharing example
 * of [SPE methodology §5.2] (Joe Mario's false_sharing_example.c): a lock thread writes lock0/lock1 while
 * reader threads read reader1..4 of the same struct. With -DNO_FALSE_SHARING the padding moves
 * the reader fields to the next cache line. counter is truly shared: every thread writes it. */
typedef struct _buf {
    long lock0;
    long lock1;
    long reserved1;
#if defined(NO_FALSE_SHARING)
    long pad[5]; /* keep the lock fields on their own cache line */
#else
    long pad[1]; /* provoke false sharing */
#endif
    long reader1;
    long reader2;
    long reader3;
    long reader4;
} buf __attribute__((aligned(64)));

buf buf1;
buf buf2;
long counter __attribute__((aligned(64)));

__attribute__((noinline)) void lock_side(void) {
    __sync_lock_test_and_set(&buf1.lock0, 1);
    buf1.lock0 += 1;
    buf2.lock1 = 1;
}

__attribute__((noinline)) long reader_side(void) {
    volatile long var;
    var = *(volatile long *)&buf1.reader1;
    var = *(volatile long *)&buf2.reader1;
    return var;
}

__attribute__((noinline)) void count(void) {
    *(volatile long *)&counter += 1;
}

int main(void) {
    lock_side();
    count();
    return (int)reader_side();
}
