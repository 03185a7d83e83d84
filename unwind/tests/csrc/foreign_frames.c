/* Foreign (C) frames for heapsample-unwind's tests, compiled by build.rs with
 * -O2 -fomit-frame-pointer. Each function calls back into Rust at the bottom of a
 * C-built stack segment that exercises a different kind of CFI:
 *   - hs_c_chain:            plain rsp-based frames, alternating with
 *   - hs_c_vla:              an rbp-based frame (a VLA forces rbp as frame pointer);
 *   - hs_c_cfa_expression:   a CFA given by DW_CFA_def_cfa_expression, which the fast
 *                            path does not evaluate (it must fall back to libgcc). */
#include <stdint.h>

typedef uint64_t (*hs_callback)(void *arg);

uint64_t hs_c_chain(int depth, hs_callback callback, void *arg);

__attribute__((noinline)) uint64_t hs_c_vla(int depth, hs_callback callback, void *arg) {
    volatile char buffer[depth + 16];
    buffer[0] = (char)depth;
    uint64_t result = hs_c_chain(depth - 1, callback, arg);
    return result + (uint64_t)buffer[0];
}

__attribute__((noinline)) uint64_t hs_c_chain(int depth, hs_callback callback, void *arg) {
    volatile char padding[40];
    padding[0] = 1;
    uint64_t result;
    if (depth <= 0)
        result = callback(arg);
    else if (depth % 2)
        result = hs_c_vla(depth, callback, arg);
    else
        result = hs_c_chain(depth - 1, callback, arg);
    return result + (uint64_t)padding[0];
}

/* uint64_t hs_c_cfa_expression(hs_callback callback, void *arg): calls callback(arg)
 * with CFA = rsp + 16 spelled as a DWARF expression (DW_OP_breg7 16). */
__asm__(
    ".text\n"
    ".globl hs_c_cfa_expression\n"
    ".type hs_c_cfa_expression, @function\n"
    "hs_c_cfa_expression:\n"
    ".cfi_startproc\n"
    "    sub $8, %rsp\n"
    "    .cfi_escape 0x0f, 0x02, 0x77, 0x10\n"
    "    mov %rdi, %rax\n"
    "    mov %rsi, %rdi\n"
    "    call *%rax\n"
    "    add $8, %rsp\n"
    "    .cfi_def_cfa %rsp, 8\n"
    "    ret\n"
    ".cfi_endproc\n"
    ".size hs_c_cfa_expression, .-hs_c_cfa_expression\n");
