/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
// include/spelunk.h from C++: the C API and the RAII phase compile and run as no-ops.
#include "spelunk.h"

int main()
{
   spelunk::Phase p("cxx");
   spelunk_object("x", &p, sizeof p);
   return spelunk_runtime_loaded();
}
