# udah_asm_classify, rustc 1.95.0 (59807616e 2026-04-14)
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
	sete %r8b
	movzbl (%rsi), %r9d
	movzbl 6(%rsi), %r11d
	andb $-16, %r9b
	movl %ecx, %r10d
	andb $-16, %r10b
	xorl %edx, %edx
	cmpb $64, %r10b
	sete %dl
	movl %ecx, %r10d
	andb $15, %r10b
	cmpb $5, %r10b
	sete %r10b
	andb %r8b, %r10b
	cmpb $96, %r9b
	movzbl %r10b, %ebx
	cmovel %ebx, %edx
	sete %r8b
	xorb $1, %bl
	andb %r8b, %bl
	movq 24(%rsi), %r9
	shrl $8, %ecx
	movq %r9, %r8
	shrq $32, %r8
	movabsq $1030792151040, %r10
	andq %rax, %r10
	movabsq $962072674304, %r14
	cmpq %r14, %r10
	sete %bpl
	movzbl %r9b, %r10d
	cmpq $255, %r10
	setne %r10b
	sete %r15b
	andb %dl, %bpl
	andb %bl, %r15b
	orb %bpl, %r15b
	andb %bl, %r10b
	orb %dl, %bl
	xorb $1, %bl
	addb %r15b, %r15b
	xorl %r12d, %r12d
	cmpb $17, %r11b
	sete %bpl
	setne %r12b
	xorl %r14d, %r14d
	cmpb $27, %r11b
	leal (%r12,%r12,2), %r11d
	cmovel %r14d, %r11d
	testb %r10b, %r10b
	cmovel %r14d, %r11d
	orb %bl, %r11b
	orb %r15b, %r11b
	movabsq $-4294967296, %rbx
	andq %rax, %rbx
	movl $4294901760, %r12d
	orq %r12, %rbx
	movq %rax, %r15
	shlq $32, %r15
	orq %r12, %r15
	orb %dl, %bpl
	movl (%rsi), %r12d
	bswapl %r12d
	shrl $20, %r12d
	testb %dl, %dl
	cmoveq 16(%rsi), %r15
	cmoveq %rax, %rbx
	cmovneq %r14, %r9
	cmoveq 8(%rsi), %r14
	movzbl 7(%rsi), %eax
	cmovel %eax, %r8d
	cmovnel %ecx, %r12d
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
