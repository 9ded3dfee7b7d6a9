/* Context switch for AArch64 (AAPCS64).
 *
 * void yard_coro__swap(void **save_sp, void *new_sp)
 *
 * Saves the callee-saved registers x19-x28, the frame pointer x29, the link
 * register x30 (the resume address) and the low halves d8-d15 of v8-v15 in a
 * 176-byte frame on the current stack, stores sp in *save_sp, switches to
 * new_sp and restores the same frame; `ret` jumps to the restored x30.
 * With YARD_CORO_SAVE_FPU the FPCR is saved in the spare slot as well.
 */
#if defined(__aarch64__) && !defined(YARD_CORO_UCONTEXT)

    .text
    .globl yard_coro__swap
    .hidden yard_coro__swap
    .type yard_coro__swap, %function
    .p2align 4
yard_coro__swap:
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
#ifdef YARD_CORO_SAVE_FPU
    mrs x9, fpcr
    str x9, [sp, #160]
#endif
    mov x9, sp
    str x9, [x0]
    mov sp, x1
#ifdef YARD_CORO_SAVE_FPU
    ldr x9, [sp, #160]
    msr fpcr, x9
#endif
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #176
    ret
    .size yard_coro__swap, .-yard_coro__swap

/* First code of a new context: yard_coro_ctx_make left ctx in x19, fn in x20
 * and arg in x21; x29 = 0 ends frame-pointer walks. Never returns. */
    .globl yard_coro__trampoline
    .hidden yard_coro__trampoline
    .type yard_coro__trampoline, %function
    .p2align 4
yard_coro__trampoline:
    mov x0, x19
    mov x1, x20
    mov x2, x21
    bl yard_coro__ctx_entry
    brk #0
    .size yard_coro__trampoline, .-yard_coro__trampoline

#endif
    .section .note.GNU-stack,"",%progbits
