# udah_asm_detect, rustc 1.95.0 (59807616e 2026-04-14)
	movzbl (%rsi), %eax
	testl %eax, %eax
	je .L0
	movq 1(%rsi), %rdx
	cmpl $1, %eax
	jne .L1
	cmpb $2, %dl
	sete %cl
	setb %sil
	cmpb $3, %dl
	sete %dl
	jmp .L2
.L0:
	movb $1, %dl
	movb $1, %sil
	movb $1, %cl
	jmp .L2
.L1:
	movq (%rdi), %rcx
	movq 8(%rdi), %r8
	movl 16(%rdi), %r9d
	movq 9(%rsi), %r10
	xorq %r8, %r10
	xorq %rcx, %rdx
	movl 17(%rsi), %esi
	xorl %r9d, %esi
	orq %rdx, %rsi
	orq %r10, %rsi
	setne %dl
	sete %sil
	orq %r9, %rcx
	orq %r8, %rcx
	sete %cl
	orb %sil, %cl
	movl %edx, %esi
.L2:
	pushq %rbx
	movzbl (%rdi), %r8d
	andb $-16, %r8b
	cmpb $96, %r8b
	sete %r8b
	movl 20(%rdi), %r9d
	movl 24(%rdi), %r10d
	addq %r9, %r10
	movzwl 28(%rdi), %r9d
	movl 32(%rdi), %r11d
	addq %r9, %r11
	addq %r10, %r11
	movl 36(%rdi), %r9d
	addq %r11, %r9
	movzwl %r9w, %r10d
	shrq $16, %r9
	addq %r10, %r9
	movzwl %r9w, %r10d
	shrq $16, %r9
	addl %r10d, %r9d
	movl %r9d, %r10d
	shrl $16, %r10d
	addl %r9d, %r10d
	xorw 30(%rdi), %r10w
	movzbl 6(%rdi), %r9d
	cmpw $-1, %r10w
	sete %r10b
	cmpb $27, %r9b
	sete %r11b
	andb %r8b, %r11b
	cmpb $17, %r9b
	sete %r9b
	andb %r8b, %r9b
	xorl %r8d, %r8d
	cmpb $69, 20(%rdi)
	sete %r8b
	andb %r8b, %r10b
	movl %r11d, %edi
	orb %r9b, %dil
	movb $2, %bl
	subb %r11b, %bl
	testb %al, %al
	setne %al
	movzbl %r10b, %r10d
	cmovel %r10d, %r8d
	andb %sil, %r11b
	andb %dl, %r9b
	orb %r11b, %r9b
	orb %dil, %al
	orb %al, %r10b
	xorb $5, %r10b
	leal 3(%r9), %eax
	movzbl %r10b, %edx
	movzbl %bl, %esi
	testb %r9b, %r9b
	cmovel %edx, %esi
	movzbl %al, %eax
	testb %r8b, %r8b
	cmovel %esi, %eax
	testb %cl, %cl
	cmovel %esi, %eax
	popq %rbx
	retq
