# udah_asm_detect_stamped, rustc 1.95.0 (59807616e 2026-04-14)
	movdqu (%rsi), %xmm0
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
	movdqu (%rdi), %xmm1
	pxor %xmm0, %xmm1
	movl 16(%rdi), %r8d
	pshufd $238, %xmm1, %xmm0
	movq %xmm0, %r9
	xorl 16(%rsi), %r8d
	movq %xmm1, %rsi
	orq %rsi, %r8
	movq %r8, %rsi
	orq %r9, %rsi
	movzbl %dl, %edx
	movl $4, %esi
	cmovel %esi, %edx
	cmpb $17, %cl
	movl $4, %r10d
	cmovel %edx, %r10d
	cmpb $27, %cl
	cmovel %edx, %r10d
	cmpb $96, %al
	cmovnel %esi, %r10d
	orq %r9, %r8
	movl $3, %eax
	cmovnel %r10d, %eax
	cmpb $69, 20(%rdi)
	cmovnel %r10d, %eax
	retq
