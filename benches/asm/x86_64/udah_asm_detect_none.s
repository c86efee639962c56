# udah_asm_detect_none, rustc 1.95.0 (59807616e 2026-04-14)
	movzbl (%rdi), %ecx
	movzbl 6(%rdi), %eax
	andb $-16, %cl
	cmpb $96, %cl
	sete %cl
	movl 20(%rdi), %edx
	movl 24(%rdi), %esi
	addq %rdx, %rsi
	movzwl 28(%rdi), %edx
	movl 32(%rdi), %r8d
	addq %rdx, %r8
	addq %rsi, %r8
	movl 36(%rdi), %edx
	addq %r8, %rdx
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
	cmpb $27, %al
	sete %sil
	andb %cl, %sil
	cmpb $17, %al
	sete %al
	andb %cl, %al
	cmpb $69, 20(%rdi)
	sete %cl
	andb %dl, %cl
	movl %esi, %edx
	orb %al, %dl
	movl %edx, %edi
	orb %cl, %dil
	xorb $5, %dil
	addb $3, %dl
	movzbl %dil, %edi
	testb %al, %al
	movl $2, %eax
	cmovel %edi, %eax
	testb %sil, %sil
	movl $1, %esi
	cmovel %eax, %esi
	movzbl %dl, %eax
	testb %cl, %cl
	cmovel %esi, %eax
	retq
