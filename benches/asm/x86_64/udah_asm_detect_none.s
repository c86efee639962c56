# udah_asm_detect_none, rustc 1.95.0 (59807616e 2026-04-14)
	movzbl (%rdi), %eax
	movzbl 6(%rdi), %ecx
	andb $-16, %al
	cmpb $96, %al
	sete %dl
	cmpb $27, %cl
	sete %al
	andb %dl, %al
	movl 20(%rdi), %esi
	movl 24(%rdi), %r8d
	addq %rsi, %r8
	movzwl 28(%rdi), %esi
	movl 32(%rdi), %r9d
	addq %rsi, %r9
	addq %r8, %r9
	movl 36(%rdi), %esi
	addq %r9, %rsi
	movzwl %si, %r8d
	shrq $16, %rsi
	addq %r8, %rsi
	movzwl %si, %r8d
	shrq $16, %rsi
	addl %r8d, %esi
	movl %esi, %r8d
	shrl $16, %r8d
	addl %esi, %r8d
	cmpb $17, %cl
	sete %cl
	andb %dl, %cl
	movl %eax, %edx
	orb %cl, %dl
	cmpb $69, 20(%rdi)
	sete %sil
	xorw 30(%rdi), %r8w
	cmpw $-1, %r8w
	sete %dil
	andb %sil, %dil
	movl %edx, %esi
	orb %dil, %sil
	xorb $5, %sil
	addb $3, %dl
	movzbl %sil, %esi
	testb %cl, %cl
	movl $2, %ecx
	cmovel %esi, %ecx
	testb %al, %al
	movl $1, %esi
	cmovel %ecx, %esi
	movzbl %dl, %eax
	testb %dil, %dil
	cmovel %esi, %eax
	retq
