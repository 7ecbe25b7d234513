// SPDX-License-Identifier: MIT OR Apache-2.0
// A dynamically linked aarch64 program annotated with include/spelunk.h, for the VM test of
// `spelunk record` with the preloaded runtime: an 8 MiB heap table named as an object, a
// "fill" phase (4 passes of stores) and a "sum" phase (8 passes of loads, about twice as long).
// The SPE stub samples at a fixed rate (8 records per 200 µs of guest time), so each phase must
// hold about its duration / 25 µs samples if the runtime's clock was put on the samples' clock.
#include <stdio.h>
#include <stdlib.h>
#include "spelunk.h"

static volatile double sink;

int main(void) {
    size_t n = (size_t)1 << 20;
    double *a = malloc(n * sizeof *a);
    if (!a) return 1;
    spelunk_object("table", a, n * sizeof *a);
    spelunk_phase_begin("fill");
    for (int r = 0; r < 4; r++)
        for (size_t i = 0; i < n; i++) a[i] = (double)(i * (size_t)r);
    spelunk_phase_end("fill");
    spelunk_phase_begin("sum");
    double s = 0;
    for (int r = 0; r < 8; r++)
        for (size_t i = 0; i < n; i++) s += a[i];
    spelunk_phase_end("sum");
    sink = s;
    spelunk_object_free(a);
    free(a);
    printf("phases: runtime %s\n", spelunk_runtime_loaded() ? "loaded" : "not loaded");
    return 0;
}
