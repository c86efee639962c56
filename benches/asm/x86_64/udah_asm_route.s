# udah_asm_route, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %rbx
	movzbl (%rsi), %edx
	movzwl 20(%rsi), %eax
	movq 22(%rsi), %xmm0
	pxor %xmm1, %xmm1
	punpcklwd %xmm1, %xmm0
	movq 32(%rsi), %rcx
	movq %rcx, %xmm2
	punpcklwd %xmm1, %xmm2
	pshufd $238, %xmm2, %xmm1
	paddd %xmm2, %xmm1
	pshufd $85, %xmm1, %xmm2
	paddd %xmm1, %xmm2
	movd %xmm2, %r8d
	pshufd $238, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	pshufd $85, %xmm1, %xmm0
	paddd %xmm1, %xmm0
	movd %xmm0, %r9d
	addl %eax, %r9d
	addl %r8d, %r9d
	movl %r9d, %r8d
	shrl $16, %r8d
	addl %r9d, %r8d
	xorw 30(%rsi), %r8w
	andb $-16, %dl
	cmpw $-1, %r8w
	sete %r9b
	xorb $69, %al
	xorl %r8d, %r8d
	cmpb $16, %al
	setb %r8b
	testb $15, %al
	sete %r10b
	andb %r9b, %r10b
	cmpb $96, %dl
	sete %bpl
	movzbl %r10b, %ebx
	cmovel %ebx, %r8d
	xorb $1, %bl
	movq (%rsi), %r14
	movl %r14d, %edx
	movq %r14, %r11
	shrq $48, %r11
	shrq $56, %r14
	movq %rcx, %r9
	shlq $32, %r9
	movl $4294901760, %r15d
	orq %r15, %r9
	cmpb $17, %r11b
	sete %r10b
	cmpb $27, %r11b
	sete %r11b
	orb %r10b, %r11b
	andb %bpl, %r11b
	movzbl 28(%rsi), %ebp
	bswapl %edx
	andb %bl, %r11b
	movb %bpl, %al
	shrl $12, %edx
	andl $65280, %edx
	orl %r14d, %edx
	orb %r8b, %r11b
	orb %r8b, %r10b
	movl %ecx, %ebx
	xorq %r15, %rbx
	xorl %r14d, %r14d
	testb %r8b, %r8b
	cmovnel %eax, %edx
	cmoveq %r14, %rbx
	movq 24(%rsi), %r8
	cmovneq %r14, %r8
	movq %rdi, %rax
	cmoveq 8(%rsi), %r14
	cmoveq 16(%rsi), %r9
	xorq %rcx, %rbx
	movb %r11b, 32(%rdi)
	movb %r10b, 33(%rdi)
	movq %r8, (%rdi)
	movq %rbx, 8(%rdi)
	movq %r14, 16(%rdi)
	movq %r9, 24(%rdi)
	movw %dx, 34(%rdi)
	popq %rbx
	popq %r14
	popq %r15
	popq %rbp
	retq
