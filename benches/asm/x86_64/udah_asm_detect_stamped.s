# udah_asm_detect_stamped, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %rbx
	movq (%rdi), %rcx
	movq 8(%rdi), %rdx
	movl 16(%rdi), %r8d
	movq 8(%rsi), %rax
	xorq %rdx, %rax
	movq (%rsi), %r9
	xorq %rcx, %r9
	movl 16(%rsi), %esi
	xorl %r8d, %esi
	orq %r9, %rsi
	movq %rsi, %r9
	orq %rax, %r9
	setne %r9b
	movl %ecx, %r10d
	andl $240, %r10d
	cmpl $96, %r10d
	sete %r10b
	movzbl 6(%rdi), %r11d
	cmpb $27, %r11b
	sete %bl
	andb %r10b, %bl
	cmpb $17, %r11b
	sete %r11b
	movb $2, %bpl
	subb %bl, %bpl
	andb %r10b, %r11b
	orb %bl, %r11b
	andb %r9b, %r11b
	movzbl %bpl, %r9d
	testb %r11b, %r11b
	movl $4, %r10d
	cmovnel %r9d, %r10d
	leal 3(%r11), %r9d
	orq %rax, %rsi
	movzbl %r9b, %esi
	movl %r10d, %eax
	cmovel %esi, %eax
	orq %r8, %rcx
	orq %rdx, %rcx
	cmovel %esi, %eax
	cmpb $69, 20(%rdi)
	cmovnel %r10d, %eax
	popq %rbx
	popq %rbp
	retq
