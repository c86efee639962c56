# udah_asm_detect, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r15
	pushq %r14
	pushq %r13
	pushq %r12
	pushq %rbx
	movzbl (%rdi), %r15d
	movzbl 6(%rdi), %r8d
	movzbl 20(%rdi), %eax
	movb %al, -1(%rsp)
	movl 20(%rdi), %r11d
	movl 24(%rdi), %r10d
	movzwl 28(%rdi), %r9d
	movl 32(%rdi), %r14d
	movl 36(%rdi), %ebx
	movzwl 30(%rdi), %edx
	movzbl (%rsi), %ecx
	testl %ecx, %ecx
	je .L0
	cmpl $1, %ecx
	jne .L1
	movzbl 1(%rsi), %edi
	cmpb $2, %dil
	sete %sil
	setb %bpl
	cmpb $3, %dil
	sete %dil
	jmp .L2
.L0:
	movb $1, %dil
	movb $1, %bpl
	movb $1, %sil
	jmp .L2
.L1:
	movq (%rdi), %r12
	movq 8(%rdi), %r13
	movl 16(%rdi), %ebp
	movq 9(%rsi), %rdi
	xorq %r13, %rdi
	movq 1(%rsi), %rax
	xorq %r12, %rax
	movl 17(%rsi), %esi
	xorl %ebp, %esi
	orq %rax, %rsi
	orq %rdi, %rsi
	setne %dil
	sete %al
	orq %rbp, %r12
	orq %r13, %r12
	sete %sil
	orb %al, %sil
	movl %edi, %ebp
.L2:
	andb $-16, %r15b
	cmpb $96, %r15b
	sete %r13b
	cmpb $27, %r8b
	sete %r12b
	andb %r13b, %r12b
	movb $2, %r15b
	subb %r12b, %r15b
	addq %r11, %r10
	addq %r14, %r9
	addq %r10, %r9
	addq %rbx, %r9
	movzwl %r9w, %eax
	shrq $16, %r9
	addq %rax, %r9
	movzwl %r9w, %eax
	shrq $16, %r9
	addl %eax, %r9d
	movl %r9d, %eax
	shrl $16, %eax
	addl %r9d, %eax
	cmpb $17, %r8b
	sete %r9b
	andb %r13b, %r9b
	movl %r12d, %r10d
	orb %r9b, %r10b
	xorl %r8d, %r8d
	cmpb $69, -1(%rsp)
	sete %r8b
	xorl %eax, %edx
	cmpw $-1, %dx
	sete %al
	andb %r8b, %al
	testb %cl, %cl
	setne %cl
	movzbl %al, %eax
	cmovel %eax, %r8d
	andb %bpl, %r12b
	andb %dil, %r9b
	orb %r12b, %r9b
	orb %r10b, %cl
	orb %cl, %al
	xorb $5, %al
	leal 3(%r9), %ecx
	movzbl %al, %eax
	movzbl %r15b, %edx
	testb %r9b, %r9b
	cmovel %eax, %edx
	movzbl %cl, %eax
	testb %sil, %sil
	cmovel %edx, %eax
	testb %r8b, %r8b
	cmovel %edx, %eax
	popq %rbx
	popq %r12
	popq %r13
	popq %r14
	popq %r15
	popq %rbp
	retq
