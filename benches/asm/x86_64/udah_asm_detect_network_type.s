# udah_asm_detect_network_type, rustc 1.95.0 (59807616e 2026-04-14)
	movl %esi, %eax
	xorb $3, %al
	movzbl (%rdi), %ecx
	movzbl 6(%rdi), %edx
	andb $-16, %cl
	cmpb $96, %cl
	sete %r8b
	cmpb $27, %dl
	sete %r9b
	andb %r8b, %r9b
	xorb $17, %dl
	movb $2, %r8b
	subb %r9b, %r8b
	movzbl %r8b, %r8d
	orb %al, %dl
	movl $4, %eax
	movl $4, %edx
	cmovel %r8d, %edx
	cmpb $96, %cl
	movzbl 20(%rdi), %ecx
	cmovnel %eax, %edx
	movl %esi, %eax
	xorb $2, %al
	xorb $69, %cl
	testb %r9b, %r9b
	cmovel %edx, %r8d
	cmpb $2, %sil
	cmovael %edx, %r8d
	orb %al, %cl
	movl $3, %eax
	cmovnel %r8d, %eax
	retq
