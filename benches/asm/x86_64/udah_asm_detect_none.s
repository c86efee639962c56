# udah_asm_detect_none, rustc 1.95.0 (59807616e 2026-04-14)
	movzbl (%rdi), %eax
	movzbl 6(%rdi), %ecx
	andb $-16, %al
	cmpb $96, %al
	sete %dl
	cmpb $27, %cl
	sete %al
	andb %dl, %al
	movzwl 38(%rdi), %esi
	rolw $8, %si
	movzwl 36(%rdi), %r8d
	movd %r8d, %xmm0
	movdqu 20(%rdi), %xmm1
	movdqa %xmm1, %xmm2
	psrlw $8, %xmm2
	psllw $8, %xmm1
	por %xmm2, %xmm1
	movdqa %xmm0, %xmm2
	psrlw $8, %xmm2
	psllw $8, %xmm0
	por %xmm2, %xmm0
	shufps $228, %xmm1, %xmm0
	shufps $216, %xmm0, %xmm0
	pshuflw $232, %xmm0, %xmm0
	pshufd $236, %xmm0, %xmm0
	pshuflw $57, %xmm0, %xmm0
	pxor %xmm2, %xmm2
	punpcklwd %xmm2, %xmm0
	punpcklwd %xmm2, %xmm1
	paddd %xmm0, %xmm1
	movzwl %si, %esi
	pshufd $238, %xmm1, %xmm0
	paddd %xmm1, %xmm0
	pshufd $85, %xmm0, %xmm1
	paddd %xmm0, %xmm1
	movd %xmm1, %r8d
	addl %esi, %r8d
	movzwl %r8w, %esi
	shrl $16, %r8d
	addl %esi, %r8d
	movl %r8d, %esi
	shrl $16, %esi
	addl %r8d, %esi
	movzwl 30(%rdi), %r8d
	cmpb $17, %cl
	sete %cl
	andb %dl, %cl
	movl %eax, %edx
	orb %cl, %dl
	cmpb $69, 20(%rdi)
	sete %dil
	rolw $8, %r8w
	xorl %esi, %r8d
	cmpw $-1, %r8w
	sete %sil
	andb %dil, %sil
	movl %edx, %edi
	orb %sil, %dil
	xorb $5, %dil
	addb $3, %dl
	movzbl %dil, %edi
	testb %cl, %cl
	movl $2, %ecx
	cmovel %edi, %ecx
	testb %al, %al
	movl $1, %edi
	cmovel %ecx, %edi
	movzbl %dl, %eax
	testb %sil, %sil
	cmovel %edi, %eax
	retq
