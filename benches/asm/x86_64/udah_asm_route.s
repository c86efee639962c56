# udah_asm_route, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %r12
	pushq %rbx
	movzwl 28(%rsi), %ecx
	movq 20(%rsi), %xmm0
	pxor %xmm1, %xmm1
	punpcklwd %xmm1, %xmm0
	movq 32(%rsi), %rax
	movq %rax, %xmm2
	punpcklwd %xmm1, %xmm2
	paddd %xmm0, %xmm2
	pshufd $238, %xmm2, %xmm0
	paddd %xmm2, %xmm0
	pshufd $85, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	movd %xmm1, %edx
	addl %ecx, %edx
	movl %edx, %r8d
	shrl $16, %r8d
	addl %edx, %r8d
	xorw 30(%rsi), %r8w
	movzwl 20(%rsi), %ecx
	cmpw $-1, %r8w
	sete %dl
	movzbl (%rsi), %r9d
	andb $-16, %r9b
	movl %ecx, %r10d
	andb $-16, %r10b
	xorl %r8d, %r8d
	cmpb $64, %r10b
	sete %r8b
	movl %ecx, %r10d
	andb $15, %r10b
	cmpb $5, %r10b
	sete %r10b
	andb %dl, %r10b
	cmpb $96, %r9b
	sete %r14b
	movzbl %r10b, %r15d
	cmovel %r15d, %r8d
	xorb $1, %r15b
	movq (%rsi), %rdx
	movq 24(%rsi), %r9
	movq %rdx, %r12
	shrq $48, %r12
	movq %rdx, %r11
	shrq $56, %r11
	shrl $8, %ecx
	movq %r9, %r10
	shrq $32, %r10
	cmpb $17, %r12b
	sete %bl
	cmpb $27, %r12b
	sete %bpl
	orb %bl, %bpl
	andb %r14b, %bpl
	andb %r15b, %bpl
	orb %r8b, %bpl
	orb %r8b, %bl
	movabsq $-4294967296, %r14
	andq %rax, %r14
	movl $4294901760, %r12d
	orq %r12, %r14
	movq %rax, %r15
	shlq $32, %r15
	orq %r12, %r15
	bswapl %edx
	shrl $20, %edx
	xorl %r12d, %r12d
	testb %r8b, %r8b
	cmovneq %r12, %r9
	cmoveq 8(%rsi), %r12
	cmoveq 16(%rsi), %r15
	cmoveq %rax, %r14
	cmoveq %r11, %r10
	movq %rdi, %rax
	cmovnel %ecx, %edx
	movb %bpl, 32(%rdi)
	movb %bl, 33(%rdi)
	movq %r9, (%rdi)
	movq %r14, 8(%rdi)
	movq %r12, 16(%rdi)
	movq %r15, 24(%rdi)
	movb %r10b, 34(%rdi)
	movb %dl, 35(%rdi)
	popq %rbx
	popq %r12
	popq %r14
	popq %r15
	popq %rbp
	retq
