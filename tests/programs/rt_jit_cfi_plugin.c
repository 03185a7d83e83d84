/*
 * The module of `rt_jit_cfi reload`: `plugin_call(target, bytes)` calls
 * `target(bytes)` and returns its result. Written in assembly so that its
 * code reads nothing outside itself (a copy of its page runs anywhere) and
 * keeps no frame pointer but a callee-saved register on the stack: a walk
 * that took it for code without unwind information would step it by the
 * caller's rbp and lose the caller's frame. Its CFI says exactly how.
 */
__asm__(
    ".text\n"
    ".globl plugin_call\n"
    ".type plugin_call, @function\n"
    ".p2align 4\n"
    "plugin_call:\n"
    ".cfi_startproc\n"
    "    push %rbx\n"
    ".cfi_def_cfa_offset 16\n"
    ".cfi_offset %rbx, -16\n"
    "    mov %rdi, %rax\n"
    "    mov %rsi, %rdi\n"
    "    xor %ebx, %ebx\n"
    "    call *%rax\n"
    "    pop %rbx\n"
    ".cfi_def_cfa_offset 8\n"
    "    ret\n"
    ".cfi_endproc\n"
    ".size plugin_call, .-plugin_call\n");
