# udah_asm_version_libibverbs, rustc 1.95.0 (59807616e 2026-04-14)
	movzwl 28(%rdi), %edx
	movq 20(%rdi), %xmm0
	movzbl (%rdi), %eax
	movzbl 20(%rdi), %ecx
	pxor %xmm1, %xmm1
	punpcklwd %xmm1, %xmm0
	movq 32(%rdi), %xmm2
	punpcklwd %xmm1, %xmm2
	paddd %xmm0, %xmm2
	pshufd $238, %xmm2, %xmm0
	paddd %xmm2, %xmm0
	pshufd $85, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	movd %xmm1, %esi
	addl %edx, %esi
	movl %esi, %edx
	shrl $16, %edx
	addl %esi, %edx
	xorw 30(%rdi), %dx
	cmpw $-1, %dx
	sete %dl
	andb $-16, %al
	xorb $69, %cl
	xorl %esi, %esi
	cmpb $16, %cl
	setb %sil
	testb $15, %cl
	sete %cl
	xorl %edi, %edi
	andb %dl, %cl
	movl $6, %edx
	cmovnel %edi, %edx
	cmpb $96, %al
	movzbl %cl, %eax
	cmovel %eax, %esi
	cmovnel %edi, %edx
	testb %sil, %sil
	movl $4, %eax
	cmovel %edx, %eax
	retq
