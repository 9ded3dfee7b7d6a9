/* Context switch for x86-64 System V.
 *
 * void yard_coro__swap(void **save_sp, void *new_sp)
 *
 * Pushes the callee-saved registers (rbp, rbx, r12-r15) on the current stack
 * (the caller's `call` already pushed rip), stores rsp in *save_sp, loads
 * new_sp and pops the same frame from it; `ret` resumes the other context.
 * Everything caller-saved is dead across a call by the ABI, so nothing else
 * needs saving. With YARD_CORO_SAVE_FPU the MXCSR and x87 control word are
 * saved too (only needed if code changes rounding modes or exception masks).
 */
#if defined(__x86_64__) && !defined(YARD_CORO_UCONTEXT)

    .text
    .globl yard_coro__swap
    .hidden yard_coro__swap
    .type yard_coro__swap, @function
    .p2align 4
yard_coro__swap:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
#ifdef YARD_CORO_SAVE_FPU
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
#endif
    movq %rsp, (%rdi)
    movq %rsi, %rsp
#ifdef YARD_CORO_SAVE_FPU
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
#endif
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
#ifdef YARD_CORO_SWITCH_JMP
    /* pop + indirect jump instead of ret: the return-stack predictor always
     * mispredicts a ret into another stack, while the indirect predictor
     * learns a ping-pong's alternating targets. It makes the raw ping-pong
     * 3x faster but leaves the return stack unbalanced, which costs more in
     * the scheduler's yield path (see docs/coro.md), so it is off by default. */
    popq %rcx
    jmp *%rcx
#else
    ret
#endif
    .cfi_endproc
    .size yard_coro__swap, .-yard_coro__swap

/* First code run on a new context: the frame built by yard_coro_ctx_make
 * left ctx in r14, fn in r12 and arg in r13. rsp is 16-byte aligned here, as
 * the ABI wants before a call. The entry never returns. */
    .globl yard_coro__trampoline
    .hidden yard_coro__trampoline
    .type yard_coro__trampoline, @function
    .p2align 4
yard_coro__trampoline:
    .cfi_startproc
    .cfi_undefined rip
    movq %r14, %rdi
    movq %r12, %rsi
    movq %r13, %rdx
    call yard_coro__ctx_entry
    ud2
    .cfi_endproc
    .size yard_coro__trampoline, .-yard_coro__trampoline

#endif
    .section .note.GNU-stack,"",@progbits
