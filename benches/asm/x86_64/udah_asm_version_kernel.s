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
	xorb $69, %al
	xorl %esi, %esi
	cmpb $16, %al
	setb %sil
	testb $15, %al
	sete %al
	xorl %edi, %edi
	andb %cl, %al
	movl $6, %ecx
	cmovnel %edi, %ecx
	cmpb $96, %dl
	movzbl %al, %eax
	cmovel %eax, %esi
	cmovnel %edi, %ecx
	testb %sil, %sil
	movl $4, %eax
	cmovel %ecx, %eax
	retq
