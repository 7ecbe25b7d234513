/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* The annotation header compiled into a program: natively no runtime is loaded and every call
 * is a no-op; with a runtime preloaded (tests/fake_runtime.c, or the emulator's) the weak
 * references resolve to it at load time. Prints what it observed; test.sh checks the output. */
#include <stdio.h>
#include <stdlib.h>
#include "spelunk.h"

int main(void)
{
   static double data[1024];
   int loaded = spelunk_runtime_loaded();
   spelunk_object("data", data, sizeof data);
   spelunk_tag_mapping("static", data);
   spelunk_phase_begin("outer");
   spelunk_phase_begin("inner");
   data[1] = 1.0;
   spelunk_phase_end("inner");
   spelunk_phase_end("outer");
   spelunk_object_free(data);
   printf("runtime loaded: %d\n", loaded);
   return 0;
}
