# udah_asm_net_type_by_grh, rustc 1.95.0 (59807616e 2026-04-14)
	movzbl (%rdi), %eax
	andb $-16, %al
	movl 20(%rdi), %ecx
	movl 24(%rdi), %edx
	movzwl 28(%rdi), %esi
	movl 32(%rdi), %r8d
	addq %rsi, %r8
	movl 36(%rdi), %esi
	addq %rcx, %rdx
	addq %r8, %rdx
	addq %rsi, %rdx
	movzwl %dx, %esi
	shrq $16, %rdx
	addq %rsi, %rdx
	movzwl %dx, %esi
	shrq $16, %rdx
	addl %esi, %edx
	movl %edx, %esi
	shrl $16, %esi
	addl %edx, %esi
	xorw 30(%rdi), %si
	cmpw $-1, %si
	sete %dl
	xorb $69, %cl
	xorl %esi, %esi
	cmpb $16, %cl
	setb %sil
	testb $15, %cl
	sete %cl
	andb %dl, %cl
	cmpb $96, %al
	movzbl %cl, %eax
	cmovel %eax, %esi
	cmpb $17, 6(%rdi)
	sete %al
	addb %al, %al
	incb %al
	movzbl %al, %ecx
	testb %sil, %sil
	movl $2, %eax
	cmovel %ecx, %eax
	retq
