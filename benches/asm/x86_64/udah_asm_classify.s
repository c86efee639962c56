# udah_asm_classify, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %r13
	pushq %r12
	pushq %rbx
	movzbl (%rsi), %r8d
	movzbl 28(%rsi), %ebx
	andb $-16, %r8b
	movzwl 20(%rsi), %eax
	movq 22(%rsi), %xmm0
	pxor %xmm1, %xmm1
	punpcklwd %xmm1, %xmm0
	movq 32(%rsi), %r15
	movq %r15, %xmm2
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
	addl %eax, %r9d
	addl %edx, %r9d
	movl %r9d, %edx
	shrl $16, %edx
	addl %r9d, %edx
	xorw 30(%rsi), %dx
	cmpw $-1, %dx
	sete %r9b
	xorb $69, %al
	xorl %edx, %edx
	cmpb $16, %al
	setb %dl
	testb $15, %al
	sete %r10b
	andb %r9b, %r10b
	cmpb $96, %r8b
	sete %r8b
	movzbl %r10b, %r9d
	cmovel %r9d, %edx
	xorb $1, %r9b
	andb %r8b, %r9b
	movq (%rsi), %r14
	movl %r14d, %r8d
	bswapl %r8d
	movq %r14, %rcx
	shrq $48, %rcx
	movq %rcx, %r12
	movq %rcx, -8(%rsp)
	shrq $56, %r14
	movq %r15, %r10
	shlq $32, %r10
	movl $4294901760, %ecx
	orq %rcx, %r10
	movb %bl, %al
	shrl $12, %r8d
	andl $65280, %r8d
	orl %r14d, %r8d
	movl %r15d, %ebx
	xorq %rcx, %rbx
	xorl %ecx, %ecx
	testb %dl, %dl
	cmovnel %eax, %r8d
	cmoveq %rcx, %rbx
	movq 24(%rsi), %r14
	cmovneq %rcx, %r14
	cmoveq 16(%rsi), %r10
	movzbl %r14b, %eax
	movq 8(%rsi), %r11
	cmovneq %rcx, %r11
	xorl %ecx, %ecx
	cmpq $255, %rax
	sete %bpl
	setne %sil
	xorl %r13d, %r13d
	andb %r9b, %sil
	setne %r13b
	cmpb $17, %r12b
	sete %r12b
	leal (%r13,%r13,2), %r13d
	cmovel %ecx, %r13d
	orb %dl, %r12b
	xorq %r15, %rbx
	movl %r9d, %ecx
	orb %dl, %cl
	xorb $1, %cl
	movabsq $1030792151040, %rax
	andq %r15, %rax
	movabsq $962072674304, %r15
	cmpq %r15, %rax
	sete %al
	andb %dl, %al
	andb %r9b, %bpl
	orb %al, %bpl
	addb %bpl, %bpl
	cmpb $27, -8(%rsp)
	movl $0, %eax
	cmovel %eax, %r13d
	orb %cl, %bpl
	orb %r13b, %bpl
	movb %bpl, 3(%rdi)
	movb %dl, (%rdi)
	movq %r14, 4(%rdi)
	movq %rbx, 12(%rdi)
	movb %r12b, 1(%rdi)
	movq %r11, 20(%rdi)
	movq %r10, 28(%rdi)
	movb %sil, 2(%rdi)
	movw %r8w, 36(%rdi)
	movq %rdi, %rax
	popq %rbx
	popq %r12
	popq %r13
	popq %r14
	popq %r15
	popq %rbp
	retq
