# udah_asm_classify, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %r12
	pushq %rbx
	movzwl 28(%rsi), %edx
	movq 20(%rsi), %xmm0
	movzwl 20(%rsi), %eax
	pxor %xmm1, %xmm1
	punpcklwd %xmm1, %xmm0
	movq 32(%rsi), %rcx
	movq %rcx, %xmm2
	punpcklwd %xmm1, %xmm2
	paddd %xmm0, %xmm2
	pshufd $238, %xmm2, %xmm0
	paddd %xmm2, %xmm0
	pshufd $85, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	movd %xmm1, %r8d
	addl %edx, %r8d
	movl %r8d, %edx
	shrl $16, %edx
	addl %r8d, %edx
	xorw 30(%rsi), %dx
	cmpw $-1, %dx
	sete %r8b
	movzbl (%rsi), %r9d
	andb $-16, %r9b
	movl %eax, %r10d
	andb $-16, %r10b
	xorl %edx, %edx
	cmpb $64, %r10b
	sete %dl
	movl %eax, %r10d
	andb $15, %r10b
	cmpb $5, %r10b
	sete %r10b
	andb %r8b, %r10b
	cmpb $96, %r9b
	setne %r8b
	movzbl %r10b, %ebx
	cmovel %ebx, %edx
	orb %r8b, %bl
	orb %dl, %bl
	movl %ebx, %ebp
	xorb $1, %bpl
	movq 24(%rsi), %r9
	shrl $8, %eax
	movq %r9, %r8
	shrq $32, %r8
	movabsq $1030792151040, %r10
	andq %rcx, %r10
	movabsq $962072674304, %r11
	cmpq %r11, %r10
	sete %r14b
	movzbl %r9b, %r10d
	cmpq $255, %r10
	setne %r10b
	sete %r11b
	andb %dl, %r14b
	andb %bpl, %r11b
	orb %r14b, %r11b
	movzbl 6(%rsi), %r15d
	andb %bpl, %r10b
	xorb %dl, %bl
	andb $1, %bl
	addb %r11b, %r11b
	xorl %r12d, %r12d
	cmpb $17, %r15b
	sete %bpl
	setne %r12b
	xorl %r14d, %r14d
	cmpb $27, %r15b
	leal (%r12,%r12,2), %r15d
	cmovel %r14d, %r15d
	testb %r10b, %r10b
	cmovel %r14d, %r15d
	orb %bl, %r11b
	orb %r15b, %r11b
	movabsq $-4294967296, %rbx
	andq %rcx, %rbx
	movl $4294901760, %r12d
	orq %r12, %rbx
	movq %rcx, %r15
	shlq $32, %r15
	orq %r12, %r15
	orb %dl, %bpl
	movl (%rsi), %r12d
	bswapl %r12d
	shrl $20, %r12d
	testb %dl, %dl
	cmoveq 16(%rsi), %r15
	cmoveq %rcx, %rbx
	cmovneq %r14, %r9
	cmoveq 8(%rsi), %r14
	movzbl 7(%rsi), %ecx
	cmovel %ecx, %r8d
	cmovnel %eax, %r12d
	movq %rdi, %rax
	movb %r11b, 3(%rdi)
	movb %dl, (%rdi)
	movq %r9, 4(%rdi)
	movq %rbx, 12(%rdi)
	movb %bpl, 1(%rdi)
	movq %r14, 20(%rdi)
	movq %r15, 28(%rdi)
	movb %r10b, 2(%rdi)
	movb %r8b, 36(%rdi)
	movb %r12b, 37(%rdi)
	popq %rbx
	popq %r12
	popq %r14
	popq %r15
	popq %rbp
	retq
