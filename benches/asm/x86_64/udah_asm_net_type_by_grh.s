# udah_asm_net_type_by_grh, rustc 1.95.0 (59807616e 2026-04-14)
	movzbl (%rdi), %eax
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
	andb $-16, %al
	cmpw $-1, %si
	sete %dl
	movl %ecx, %esi
	andb $-16, %sil
	xorl %r8d, %r8d
	cmpb $64, %sil
	sete %r8b
	andb $15, %cl
	cmpb $5, %cl
	sete %cl
	andb %dl, %cl
	cmpb $96, %al
	movzbl %cl, %eax
	cmovel %eax, %r8d
	cmpb $17, 6(%rdi)
	sete %al
	addb %al, %al
	incb %al
	movzbl %al, %ecx
	testb %r8b, %r8b
	movl $2, %eax
	cmovel %ecx, %eax
	retq
