if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
if (a) x
else
;
