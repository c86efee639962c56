# udah_asm_detect_stamped, rustc 1.95.0 (59807616e 2026-04-14)
	pushq %rbp
	pushq %r14
	pushq %rbx
	movzbl (%rdi), %eax
	movzbl 6(%rdi), %r11d
	andb $-16, %al
	cmpb $96, %al
	sete %r10b
	cmpb $27, %r11b
	sete %bl
	movl %r10d, %ecx
	andb %bl, %cl
	movb $2, %al
	subb %cl, %al
	movq (%rdi), %rcx
	movq 8(%rdi), %rdx
	movl 16(%rdi), %r8d
	movq 8(%rsi), %r9
	xorq %rdx, %r9
	movq (%rsi), %r14
	xorq %rcx, %r14
	movl 16(%rsi), %esi
	xorl %r8d, %esi
	orq %r14, %rsi
	movq %rsi, %r14
	orq %r9, %r14
	setne %bpl
	cmpb $17, %r11b
	sete %r11b
	orb %bl, %r11b
	andb %r10b, %r11b
	andb %bpl, %r11b
	movzbl %al, %eax
	testb %r11b, %r11b
	movl $4, %r10d
	cmovnel %eax, %r10d
	leal 3(%r11), %eax
	orq %r9, %rsi
	movzbl %al, %esi
	movl %r10d, %eax
	cmovel %esi, %eax
	orq %r8, %rcx
	orq %rdx, %rcx
	cmovel %esi, %eax
	cmpb $69, 20(%rdi)
	cmovnel %r10d, %eax
	popq %rbx
	popq %r14
	popq %rbp
	retq
