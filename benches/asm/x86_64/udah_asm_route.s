# udah_asm_route, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %rbx
	movzbl (%rsi), %r8d
	andb $-16, %r8b
	movzwl 20(%rsi), %ecx
	movq 22(%rsi), %xmm0
	pxor %xmm1, %xmm1
	punpcklwd %xmm1, %xmm0
	movq 32(%rsi), %rax
	movq %rax, %xmm2
	punpcklwd %xmm1, %xmm2
	pshufd $238, %xmm2, %xmm1
	paddd %xmm2, %xmm1
	pshufd $85, %xmm1, %xmm2
	paddd %xmm1, %xmm2
	movd %xmm2, %edx
	pshufd $238, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	pshufd $85, %xmm1, %xmm0
	paddd %xmm1, %xmm0
	movd %xmm0, %r9d
	addl %ecx, %r9d
	addl %edx, %r9d
	movl %r9d, %edx
	shrl $16, %edx
	addl %r9d, %edx
	xorw 30(%rsi), %dx
	cmpw $-1, %dx
	sete %r9b
	movl %ecx, %r10d
	andb $-16, %r10b
	xorl %edx, %edx
	cmpb $64, %r10b
	sete %dl
	andb $15, %cl
	cmpb $5, %cl
	sete %r10b
	andb %r9b, %r10b
	cmpb $96, %r8b
	sete %bpl
	movzbl %r10b, %r11d
	cmovel %r11d, %edx
	xorb $1, %r11b
	movq (%rsi), %r14
	movl %r14d, %r8d
	movq %r14, %r15
	shrq $48, %r15
	shrq $56, %r14
	movq %rax, %r9
	shlq $32, %r9
	movl $4294901760, %ebx
	orq %rbx, %r9
	movabsq $-4294967296, %r10
	andq %rax, %r10
	orq %rbx, %r10
	cmpb $17, %r15b
	sete %bl
	cmpb $27, %r15b
	sete %r15b
	orb %bl, %r15b
	andb %bpl, %r15b
	movzbl 28(%rsi), %ebp
	bswapl %r8d
	andb %r11b, %r15b
	movb %bpl, %cl
	shrl $12, %r8d
	andl $65280, %r8d
	orl %r14d, %r8d
	orb %dl, %r15b
	orb %dl, %bl
	xorl %r11d, %r11d
	testb %dl, %dl
	cmovnel %ecx, %r8d
	movq 24(%rsi), %rcx
	cmovneq %r11, %rcx
	cmoveq %rax, %r10
	cmoveq 8(%rsi), %r11
	movq %rdi, %rax
	cmoveq 16(%rsi), %r9
	movb %r15b, 32(%rdi)
	movb %bl, 33(%rdi)
	movq %rcx, (%rdi)
	movq %r10, 8(%rdi)
	movq %r11, 16(%rdi)
	movq %r9, 24(%rdi)
	movw %r8w, 34(%rdi)
	popq %rbx
	popq %r14
	popq %r15
	popq %rbp
	retq
