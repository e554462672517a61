do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
do
x;
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
while (a);
