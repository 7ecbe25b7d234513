/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: the tool as one translation unit, so the compiler can inline the model's
 * per-op functions into the per-superblock replay (sl_flush). */
#include "sl_model.c"
#include "sl_trace.c"
#include "sl_main.c"
