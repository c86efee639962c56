# udah_asm_version_kernel, rustc 1.95.0 (59807616e 2026-04-14)
	movl 20(%rdi), %eax
	movl 24(%rdi), %ecx
	movzwl 28(%rdi), %edx
	movl 32(%rdi), %esi
	addq %rdx, %rsi
	movl 36(%rdi), %edx
	addq %rax, %rcx
	addq %rsi, %rcx
	addq %rdx, %rcx
	movzwl %cx, %edx
	shrq $16, %rcx
	addq %rdx, %rcx
	movzwl %cx, %edx
	shrq $16, %rcx
	addl %edx, %ecx
	movl %ecx, %edx
	shrl $16, %edx
	addl %ecx, %edx
	xorw 30(%rdi), %dx
	cmpw $-1, %dx
	sete %cl
	movzbl (%rdi), %edx
	andb $-16, %dl
	movl %eax, %esi
	andb $-16, %sil
	xorl %edi, %edi
	cmpb $64, %sil
	sete %dil
	andb $15, %al
	cmpb $5, %al
	sete %al
	xorl %esi, %esi
	andb %cl, %al
	movl $6, %ecx
	cmovnel %esi, %ecx
	cmpb $96, %dl
	movzbl %al, %eax
	cmovel %eax, %edi
	cmovnel %esi, %ecx
	testb %dil, %dil
	movl $4, %eax
	cmovel %ecx, %eax
	retq
