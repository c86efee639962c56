# udah_asm_detect_network_type, rustc 1.95.0 (59807616e 2026-04-14)
	movzbl (%rdi), %eax
	movzbl 6(%rdi), %ecx
	andb $-16, %al
	cmpb $96, %al
	sete %dl
	cmpb $27, %cl
	sete %r8b
	andb %dl, %r8b
	movb $2, %dl
	subb %r8b, %dl
	movl %esi, %r9d
	xorb $3, %r9b
	xorb $17, %cl
	movzbl %dl, %edx
	orb %r9b, %cl
	movl $4, %ecx
	movl $4, %r9d
	cmovel %edx, %r9d
	cmpb $96, %al
	movzbl 20(%rdi), %eax
	cmovnel %ecx, %r9d
	movl %esi, %ecx
	xorb $2, %cl
	xorb $69, %al
	testb %r8b, %r8b
	cmovel %r9d, %edx
	cmpb $2, %sil
	cmovael %r9d, %edx
	orb %cl, %al
	movl $3, %eax
	cmovnel %edx, %eax
	retq
