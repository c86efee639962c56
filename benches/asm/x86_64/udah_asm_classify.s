# udah_asm_classify, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %r13
	pushq %r12
	pushq %rbx
	movzbl (%rsi), %edx
	movzbl 28(%rsi), %ebp
	andb $-16, %dl
	movzwl 20(%rsi), %r8d
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
	movd %xmm2, %ecx
	pshufd $238, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	pshufd $85, %xmm1, %xmm0
	paddd %xmm1, %xmm0
	movd %xmm0, %r9d
	addl %r8d, %r9d
	addl %ecx, %r9d
	movl %r9d, %ecx
	shrl $16, %ecx
	addl %r9d, %ecx
	xorw 30(%rsi), %cx
	cmpw $-1, %cx
	sete %r9b
	movl %r8d, %r10d
	andb $-16, %r10b
	xorl %r11d, %r11d
	cmpb $64, %r10b
	sete %r11b
	andb $15, %r8b
	cmpb $5, %r8b
	sete %r10b
	andb %r9b, %r10b
	cmpb $96, %dl
	sete %dl
	movzbl %r10b, %r9d
	cmovel %r9d, %r11d
	xorb $1, %r9b
	andb %dl, %r9b
	movq (%rsi), %r15
	movl %r15d, %edx
	bswapl %edx
	movq %r15, %rcx
	shrq $48, %rcx
	movq %rcx, %rbx
	movq %rcx, -8(%rsp)
	shrq $56, %r15
	movq %rax, %r10
	shlq $32, %r10
	movl $4294901760, %r12d
	orq %r12, %r10
	movabsq $-4294967296, %r14
	andq %rax, %r14
	orq %r12, %r14
	movb %bpl, %r8b
	shrl $12, %edx
	andl $65280, %edx
	orl %r15d, %edx
	xorl %r15d, %r15d
	testb %r11b, %r11b
	cmovnel %r8d, %edx
	movq 24(%rsi), %r8
	cmovneq %r15, %r8
	cmoveq %rax, %r14
	cmoveq 16(%rsi), %r10
	movq %rdi, %rcx
	movq 8(%rsi), %rsi
	cmovneq %r15, %rsi
	xorl %eax, %eax
	movzbl %r8b, %edi
	cmpq $255, %rdi
	sete %bpl
	setne %dil
	xorl %r12d, %r12d
	andb %r9b, %dil
	setne %r12b
	cmpb $17, %bl
	sete %r15b
	leal (%r12,%r12,2), %r12d
	cmovel %eax, %r12d
	orb %r11b, %r15b
	movl %r9d, %r13d
	orb %r11b, %r13b
	xorb $1, %r13b
	movabsq $1030792151040, %rax
	andq %r14, %rax
	movabsq $962072674304, %rbx
	cmpq %rbx, %rax
	sete %al
	andb %r11b, %al
	andb %r9b, %bpl
	orb %al, %bpl
	addb %bpl, %bpl
	cmpb $27, -8(%rsp)
	movl $0, %eax
	cmovel %eax, %r12d
	orb %r13b, %bpl
	orb %r12b, %bpl
	movb %bpl, 3(%rcx)
	movb %r11b, (%rcx)
	movq %r8, 4(%rcx)
	movq %r14, 12(%rcx)
	movb %r15b, 1(%rcx)
	movq %rsi, 20(%rcx)
	movq %r10, 28(%rcx)
	movb %dil, 2(%rcx)
	movw %dx, 36(%rcx)
	movq %rcx, %rax
	popq %rbx
	popq %r12
	popq %r13
	popq %r14
	popq %r15
	popq %rbp
	retq
