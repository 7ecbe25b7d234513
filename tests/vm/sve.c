/* A static aarch64 program with one SVE instruction in main and no CPU-feature check:
 * `ptrue p0.b` is in the A64 encoding class op0 (bits 28:25) = 0b0010, "SVE encodings"
 * (Arm ARM, "Top-level encodings for A64"). `spelunk record --emulate` must refuse it before
 * the run, naming SVE and main (docs/record.md, "What the emulator cannot run"). It is never
 * run: QEMU's -cpu neoverse-n1 has no SVE. */
int main(void) {
  __asm__ volatile(".arch_extension sve\n\tptrue p0.b\n");
  return 0;
}
